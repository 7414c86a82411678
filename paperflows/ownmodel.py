"""The parameter that names a user's own language model: a checkpoint folder or a cached Hugging Face id.

One declaration for every paper that runs on a model the user brings (flat, mm_ego, nutribench, tvm), so each
refuses the same values the same way before any work: printable, with a "/" (a folder in the project root is
written ``./name``), at most 1,000 characters; blank means the paper's packaged model.
``components.llm.resolve_lm_source`` decides, in the paper's environment check, which of the two a value is.

    name_or_path: OwnModel = own_model_field("causal LM instead of lm")
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

LM_NAME_OR_PATH = r"^[^\x00-\x1f\x7f]*/[^\x00-\x1f\x7f]*$"
CHECKPOINT_FILES = "config.json, weights, tokenizer files"


def _blank_is_none(value: object) -> object:
    return None if isinstance(value, str) and not value.strip() else value


#: a user's model, None when not given (a blank value included)
OwnModel = Annotated[str | None, BeforeValidator(_blank_is_none)]


def own_model_field(what: str, *, files: str | None = CHECKPOINT_FILES, needs: str = "", default: str = "lm") -> Any:
    """The field of an :data:`OwnModel`: ``what`` the model is for, the checkpoint ``files`` it needs (None: not
    listed), what else it ``needs`` (a sentence), and the ``default`` model used when it is empty."""
    where = f"{files}; absolute" if files else "absolute"
    return Field(
        None,
        min_length=1,
        max_length=1000,
        pattern=LM_NAME_OR_PATH,
        description=f"Your own {what}: a checkpoint folder ({where}, ./relative to the project root or ~/...) or a "
        f"Hugging Face model id (org/name) already in the local cache; nothing is downloaded. {needs}Empty: "
        f"{default}.",
    )
