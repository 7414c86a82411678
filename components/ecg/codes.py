"""How much of a VQ tokenizer's codes the side inputs explain: entropies of the pretraining targets.

Masked-code pretraining only teaches morphology when the target code of a masked heartbeat cannot be read off the
inputs that stay visible whatever is masked: its lead (``in_chans``) and its second in the recording
(``in_times``). :func:`code_content` measures, over the real (non-padding) tokens, the plug-in entropy
``H(code)`` and the conditional entropy ``H(code | lead, time) = H(lead, time, code) - H(lead, time)`` in bits; their
ratio is the share of the targets' information that only the heartbeat itself can supply.
"""

from __future__ import annotations

import numpy as np


def entropy_bits(rows: np.ndarray) -> float:
    """Plug-in entropy (bits) of the empirical distribution of the rows of ``rows`` (N, k) (0 for N = 0)."""
    rows = np.asarray(rows)
    if len(rows) == 0:
        return 0.0
    _, counts = np.unique(rows.reshape(len(rows), -1), axis=0, return_counts=True)
    share = counts / counts.sum()
    return float(-(share * np.log2(share)).sum())


def code_content(codes: np.ndarray, in_chans: np.ndarray, in_times: np.ndarray) -> dict[str, float]:
    """``{"h_code_bits": H(code), "h_code_given_lead_time_bits": H(code | lead, time)}`` over the tokens with
    ``in_chans > 0``; ``codes``, ``in_chans`` and ``in_times`` are (N, L) arrays of one set of sentences."""
    real = np.asarray(in_chans) > 0
    side = np.stack([np.asarray(in_chans)[real], np.asarray(in_times)[real]], axis=1).astype(np.int64)
    code = np.asarray(codes)[real].astype(np.int64)[:, None]
    return {
        "h_code_bits": entropy_bits(code),
        "h_code_given_lead_time_bits": entropy_bits(np.hstack([side, code])) - entropy_bits(side),
    }
