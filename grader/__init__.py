"""Grader for the Triton course exercises: ``python -m grader check|grade|list|build``.

Modules: cli (commands), registry (tests, points, tolerances, references), source (exercise sources
-> notebooks), build (exercises/ and solutions/), rebuild (template + student cells), plan (inputs),
execute/worker (nbclient in a separate process), harness (kernel side), compare (verdicts),
grade (one submission), batch (many), report (table, JSON, feedback), selfcheck (in the notebook).
"""
