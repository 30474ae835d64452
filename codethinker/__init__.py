"""codethinker: teach code LLMs to reason about program execution with ConTra traces.

The library never imports ``stages/``, ``flows/``, DVC or Prefect.
"""

__version__ = "0.1.0"
