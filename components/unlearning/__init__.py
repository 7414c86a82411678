"""LLM unlearning on TOFU-style data: the fictitious-author benchmark, TOFU's file reader, utility sets from
offline text, TOFU's metrics as open-unlearning computes them, and the fine-tuning / unlearning batches and
losses over the shared objectives registry (`components.preference`)."""

from components.unlearning.authors import ATTRIBUTE_NAMES, IDK_TEMPLATES, AuthorConfig, author_rows, make_authors
from components.unlearning.tofu_file import (
    TofuFormatError,
    check_tofu_forget_file,
    check_tofu_retain_file,
    read_tofu_file,
)

__all__ = [
    "ATTRIBUTE_NAMES",
    "IDK_TEMPLATES",
    "AuthorConfig",
    "TofuFormatError",
    "author_rows",
    "check_tofu_forget_file",
    "check_tofu_retain_file",
    "make_authors",
    "read_tofu_file",
]
