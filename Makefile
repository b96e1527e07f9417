# The two commands of the README: `make demo` and `make test`. Everything they need is
# installed here, into .venv/ in the repository root.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# torch is pinned in one place, requirements/torch.txt (environment.yml reads it too):
# 2.13.0 is a CPU wheel on the build machines' disk; any other spec there would
# download a multi-GB CUDA build. It goes in first so the package's range is satisfied.
TORCH_REQ := requirements/torch.txt
# `make setup` and `make demo`: the library with the live dashboard and the trading
# reports, not the test suite's servers and peers (ray, jax, JupyterHub...).
EXTRAS ?= notebook,finance
# `make test`, `make docs`, `make lint` and `make tutorials`: everything the suite needs.
TEST_EXTRAS ?= test
# The extras whose packages the test extra lists itself: a venv set up for the tests
# serves `make setup` and `make demo` as it is.
TEST_INCLUDES := notebook finance export video tensorboard mlflow wandb tune gateway s3 mujoco mjx box2d docs
# A venv set up with more extras serves a command that needs fewer (after `make bench`,
# test,bench covers test): its stamp is used, so `make test` does not reinstall it, and
# an update reinstalls the extras that venv has, not fewer (the newest covering stamp).
comma := ,
extras_of = $(patsubst test,test $(TEST_INCLUDES),$(subst $(comma), ,$(patsubst $(VENV)/.installed-%,%,$(1))))
covers = $(if $(filter-out $(call extras_of,$(1)),$(subst $(comma), ,$(2))),,yes)
covering = $(firstword $(foreach s,$(shell ls -t $(VENV)/.installed-* 2>/dev/null),$(if $(call covers,$(s),$(1)),$(s))))
STAMP := $(or $(call covering,$(EXTRAS)),$(VENV)/.installed-$(EXTRAS))
TEST_STAMP := $(or $(call covering,$(TEST_EXTRAS)),$(VENV)/.installed-$(TEST_EXTRAS))

.PHONY: setup test demo docs bench lint clean tutorials

setup: $(STAMP)

$(VENV)/.installed-%: pyproject.toml Makefile $(TORCH_REQ)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r $(TORCH_REQ)
	$(PY) -m pip install --quiet -e ".[$*]"
	touch $@

# Two test processes (pytest-xdist), one per core of the 2-core box the suite is sized
# for: most tests are one busy process, so two halve the wall time. Whole files go to one
# process (loadfile), so a module's cluster, S3 server or JupyterHub starts once, and a
# file's tests keep their order. TEST_WORKERS=0 runs them in this process.
# A test process that dies (a crash, or pytest-timeout's thread method ending a hung
# test after printing every thread's stack) ends the run at once, naming the test:
# pytest-xdist 3.8 would start a replacement that, with loadfile, is never given work
# and waits forever (pytest-xdist issues 1323, 1327; fixed on main, not yet released).
# Files are handed out in the conftest's order, longest first (--no-loadscope-reorder:
# since 3.7 pytest-xdist sorts files by their number of tests instead, which sent the
# JupyterHub and exploration-trap files, few tests and 40-90 s each, to the very end).
TEST_WORKERS ?= 2

test: $(TEST_STAMP)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --max-worker-restart=0

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check elegantpod tests benchmarks docs/conf.py docs/_ext
	$(VENV)/bin/ruff format --check elegantpod tests benchmarks docs/conf.py docs/_ext

demo: setup
	$(PY) -m elegantpod.cli demo

tutorials: $(TEST_STAMP)   # every tutorial at the full budget, its claims asserted (~30 min)
	$(PY) tutorials/run_all.py

# The docs site (Sphinx + pydata-sphinx-theme + MyST-NB), offline, warnings as errors;
# the tutorials execute at the small budget, cached in docs/_build/.jupyter_cache, so a
# rebuild runs only the notebooks that changed. Open docs/_build/html/index.html.
docs: $(TEST_STAMP)
	$(PY) -m sphinx -W --keep-going -b html -d docs/_build/doctrees docs docs/_build/html

bench:
	$(MAKE) setup EXTRAS=test,bench
	$(PY) benchmarks/env_throughput.py
	$(PY) benchmarks/time_to_solve.py   # PPO, SAC and DQN vs SB3
	$(PY) benchmarks/dask_overhead.py
	$(PY) benchmarks/dask_overhead.py --pods 4 --workers 2
	$(PY) benchmarks/threads.py
	$(PY) benchmarks/eval_share.py
	$(PY) benchmarks/store_bound.py   # 30 minutes
	# Does the tournament pay: pre-registered rounds (benchmarks/plans/*.json) run from a
	# clean worktree at the plan's code commit, e.g. (Tune's methods in .venv-tune):
	#   python benchmarks/pays_study.py --plan benchmarks/plans/pays-r5-tune.json
	$(PY) benchmarks/finance_env_throughput.py
	$(PY) benchmarks/finance_pipeline.py
	$(PY) benchmarks/fusion.py
	$(PY) benchmarks/worker_parallelism.py
	$(PY) benchmarks/orchestrator_throughput.py
	$(PY) benchmarks/tournament_scaling.py
	$(PY) benchmarks/mujoco_vs_sb3.py   # hours on 2 cores at its default 100k steps x 3 seeds
	$(PY) benchmarks/mjx_locomotion.py --parts throughput   # MJX vs gymnasium on the CPU
	# on a CUDA machine: bash benchmarks/gpu_run.sh [gpu_tournament.py | mjx_locomotion.py];
	# python benchmarks/gpu_trading_pod.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
