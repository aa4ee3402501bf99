"""Accepting TrainJobs on this machine: what their pods may ask of it (``admission``), what an update may change
(``updates``, ``changes``), and remembering what ``kubetrain run`` already validated and compiled
(``compile_cache``)."""
