"""`make mutate`: mutation testing of the core modules (mutmut), too slow for `make test`.

`python -m tests.mutation [target ...]` runs it; `targets.py` says which module each target
mutates, which tests it runs and which score it must reach; `equivalent.toml` lists the mutants
judged equivalent, each with its reason.
"""
