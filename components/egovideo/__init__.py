"""Egocentric video QA (MM-Ego): Ego4D narrations, synthetic streams and frames, the narration->QA engine,
EgoMemoria-style de-biased evaluation, and Memory Pointer Prompting.

- `narrations`: reader/writer of Ego4D's ``narration.json`` (validated, errors name file/video/field);
- `synthetic`: the synthetic world (20 objects, 8 places, 6 actions), narration parsing, frame features,
  clips cut from real narrations;
- `qa`: template and LLM question engines with evidence timestamps and a controlled biased share;
- `benchmark`: video split, blind-model de-biasing, per-bucket accuracy, MDA, blind-LLM option scoring;
- `stats`: de-biased accuracy tables, pointer hits, and intervals over questions;
- `mpp`: the QA transformer with the memory pointer and the frame-selection baselines.

Import from the modules (``from components.egovideo.mpp import EgoQAModel``): this file imports none of
them, so a stage depends only on the modules it uses.
"""
