"""Grader for the Triton course exercises: ``python -m grader check|grade|list|build|report|autograder-bundle``.

Modules: cli (commands), registry (tests, points, tolerances, references), source (exercise sources
-> notebooks), build (exercises/ and solutions/), rebuild (template + student cells), plan (inputs),
execute/worker (nbclient in a separate process), harness (kernel side), compare (verdicts),
grade (one submission), batch (many), executors (local threads or a Slurm job array), formats (Canvas,
Gradescope, PrairieLearn, JUnit), class_report (the class's HTML page), bundle (Gradescope autograder),
report (table, JSON, feedback), selfcheck (in the notebook).
"""

import sys

# jsonschema (under nbformat) imports rfc3987_syntax whenever it is installed (jupyter-events pulls it in
# for JupyterLab's server), and that import builds 38 lark grammars: 2.9-4.8 s of CPU in every grader
# process on the 2-core CI machine. Nothing here validates IRI formats, so grader processes go without it.
sys.modules.setdefault("rfc3987_syntax", None)

