"""Egocentric video QA (MM-Ego): Ego4D narrations, synthetic streams and frames, the narration->QA engine,
EgoMemoria-style de-biased evaluation, and Memory Pointer Prompting.

- `narrations`: reader/writer of Ego4D's ``narration.json`` (validated, errors name file/video/field);
- `synthetic`: the synthetic world (20 objects, 8 places, 6 actions), narration parsing, frame features;
- `qa`: template and LLM question engines with evidence timestamps and a controlled biased share;
- `benchmark`: video split, blind-model de-biasing, per-bucket accuracy, MDA, blind-LLM option scoring;
- `mpp`: the QA transformer with the memory pointer and the frame-selection baselines.
"""

from components.egovideo.benchmark import (
           accuracy_table,
           bucket_accuracy,
           debias_mask,
           mean_over_buckets,
           split_videos,
)
from components.egovideo.mpp import (
           METHODS,
           EgoQAModel,
           MPPConfig,
           topk_frames,
           uniform_frames,
)
from components.egovideo.narrations import (
           Narration,
           NarrationFormatError,
           read_narrations,
           write_narrations,
)
from components.egovideo.qa import (
           Clip,
           QAFormatError,
           SampleConfig,
           sample_questions,
           template_candidates,
)
from components.egovideo.synthetic import (
           FrameConfig,
           WorldConfig,
           generate_videos,
           synthesize_frames,
)

__all__ = ["METHODS", "Clip", "EgoQAModel", "FrameConfig", "MPPConfig", "Narration", "NarrationFormatError",
           "QAFormatError", "SampleConfig", "WorldConfig", "accuracy_table", "bucket_accuracy", "debias_mask",
           "generate_videos", "mean_over_buckets", "read_narrations", "sample_questions", "split_videos",
           "synthesize_frames", "template_candidates", "topk_frames", "uniform_frames", "write_narrations"]
