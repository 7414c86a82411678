"""Multi-step arithmetic reasoning with verifiers (TVM, ORM, PRM) and verifier-guided search.

Modules (import them directly; this package imports nothing heavy so data checks stay light):

- `problems`: word problems with exact answers and the text format of their solutions;
- `policy`: a step-wise sampling policy with carry-dependent slips, recovery, and exact prefix values V*;
- `grading`: final-answer extraction and grading (integers exactly, the rest by math-verify);
- `solutions_file`: the JSON Lines format of sampled solutions ``{question, solution, answer, correct}``;
- `champ`: CHAMP's competition problems and model-written solutions as such rows (final answers read and graded);
- `labels`: ORM / PRM / TVM token labels (TVM through `components.llm.prefix_values`);
- `verifier`: a causal LM with a scalar value head trained on those labels through `components.training.fit`;
- `search`: majority vote, Best-of-N and step-level beam search.
"""
