"""Detailed-caption evaluation (DeCapBench's DCScore) and its offline synthetic world.

- `world`: scene graphs ("images": objects with category, colour, size, grid position; left-of / above
  relations), their oracle facts as templated atomic sentences, the oracle caption, and the caption
  grammar (lexicon, paraphrases) shared by the simulator and the rule-based parser.
- `simulator`: candidate captions with controlled coverage, hallucination rate, relevance-0 filler,
  paraphrase and typos, and the "human" score known by construction.
- `parsing`: the regex decomposer of captions into canonical fact tuples.
- `dcscore`: the DCScore procedure (decompose -> match -> verify; 1/c credit; recall enlarged by verified
  unmatched facts; F1 and F1_rel; trials; per-caption details as the official output) behind the `Judge`
  interface.
- `rule_judge`: the judge of the synthetic world (regex decomposer, canonical-tuple matcher with a difflib
  fallback, scene-graph verifier); `chat_judge`: an OpenAI-compatible chat-completions judge.
- `baselines`: BLEU-4 (sacrebleu), ROUGE-L (rouge-score), TF-IDF cosine (scikit-learn) and a CAPTURE-style
  object / attribute / relation F1 over parsed tuples.
- `decapbench_files`: the official oracle and candidate JSONL files (checked before any work).
"""
