"""The code-generation task (after ReCode and ReflexiCoder): write a LeetCode solution.

* :mod:`~codethinker.codegen.task`: a :class:`~codethinker.codegen.task.CodegenProblem` from a
  LeetCodeDataset record (the prompt the policy sees, the reference solution, the tests split into
  single assertions);
* :mod:`~codethinker.codegen.answer`: the program of a completion and the format check;
* :mod:`~codethinker.codegen.checks`: each test as the call the sandbox makes and the expected value
  that stays in the parent;
* :mod:`~codethinker.codegen.judge` (parent side: the verdicts) and :mod:`~codethinker.codegen.runner`
  (the sandbox's ``"leetcode_calls"`` runner): each call under its own time limit, its value sent back;
* :mod:`~codethinker.codegen.decontam`: the training problems minus the evaluation sets;
* :mod:`~codethinker.codegen.pipeline`: what the ``codegen_data`` stage runs (``codegen_truth``: the
  judge's :func:`~codethinker.codegen.judge.check_references`).

The rewards over these live in :mod:`codethinker.rewards.codegen` (docs/codegen.md).
"""
