"""Item cold start: onboarding a new LLM from a few probe answers.

``Router.add_llm`` / ``remove_llm`` (:mod:`.pool`), probe input validation
(:mod:`.probes_input`), the kNN probe head of routers without a native add (:mod:`.heads`).
"""

from .pool import llm_table
from .probes_input import probe_data

__all__ = ["llm_table", "probe_data"]
