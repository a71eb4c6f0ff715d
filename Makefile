# The README's two commands:
#   make course   set up .venv and start JupyterLab on notebooks/
#   make test     set up .venv with the developer tools and run the linter and the test suite
PYTHON ?= python3
VENV ?= .venv
# torch is installed first, pinned, so that pip never picks a build on its own. On a Linux
# machine without a GPU, the CPU-only build is much smaller:
#   make course TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH ?= torch==2.13.0
TORCH_INDEX ?=
BIN := $(VENV)/bin
# JupyterLab refuses to run as root unless told to; in a container, root is the usual user.
LAB_ARGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: course test lint release distribution grade test-browser test-colab test-oldest test-environments
course: $(VENV)/.installed-lab
	$(BIN)/jupyter lab --notebook-dir=notebooks $(LAB_ARGS)

# The browser test (tests/test_browser.py) is not part of it: it takes minutes; `make test-browser`.
# Two pytest-xdist workers, each taking a group of tests at a time (tests/conftest.py says which);
# TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 2
test: $(VENV)/.installed-dev lint
	$(BIN)/pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS))
	@echo "The browser test (JupyterLab in Chromium) is not part of this: run it with make test-browser."

# JupyterLab in headless Chromium, each release notebook opened, run and its widgets operated.
# Needs Chromium: `sudo apt install chromium` (Debian, Ubuntu), or CHROMIUM=/path/to/chrome.
test-browser: $(VENV)/.installed-dev
	COURSE_REQUIRE_BROWSER=1 $(BIN)/pytest -m browser tests/test_browser.py

# The environments students bring, each built afresh in $(ENVS)/ (several GB: PyTorch with CUDA):
#   make test-colab    Colab's packages (tests/environments/colab.txt), then `pip install -e .`
#   make test-oldest   every dependency at the lowest version pyproject.toml allows, on the
#                      oldest Python it allows
ENVS ?= $(VENV)/envs
# A pyenv's Python 3.10 is used where the shims do not offer one.
PYTHON_COLAB ?= python3.11
PYTHON_OLDEST ?= $(or $(firstword $(wildcard $(HOME)/.pyenv/versions/3.10.*/bin/python3.10)),python3.10)
test-environments: test-colab test-oldest

test-colab:
	@$(PYTHON_COLAB) --version > /dev/null 2>&1 || { echo "test-colab needs Python 3.11: set PYTHON_COLAB"; exit 1; }
	rm -rf $(ENVS)/colab
	$(PYTHON_COLAB) -m venv $(ENVS)/colab
	$(ENVS)/colab/bin/python -m pip install --quiet --upgrade pip
	$(ENVS)/colab/bin/pip install --quiet -r tests/environments/colab.txt
	$(ENVS)/colab/bin/pip install --quiet -e .
	$(ENVS)/colab/bin/python tests/environments/check_versions.py tests/environments/colab.txt
	$(ENVS)/colab/bin/python tests/environments/run_solutions.py

# The browser test is not run here: with ipywidgets 7.7.1 under JupyterLab 4.2.0 it cannot yet
# operate the widgets (it finds their controls hidden).
test-oldest: $(VENV)/.installed-dev
	@$(PYTHON_OLDEST) --version > /dev/null 2>&1 || { echo "test-oldest needs Python 3.10: set PYTHON_OLDEST"; exit 1; }
	rm -rf $(ENVS)/oldest
	$(PYTHON_OLDEST) -m venv $(ENVS)/oldest
	$(ENVS)/oldest/bin/python -m pip install --quiet --upgrade pip
	$(BIN)/python tests/environments/lowest.py dev lab > $(ENVS)/oldest.txt
	$(ENVS)/oldest/bin/pip install --quiet -c $(ENVS)/oldest.txt -e ".[dev,lab]"
	$(ENVS)/oldest/bin/python tests/environments/check_versions.py $(ENVS)/oldest.txt
	$(ENVS)/oldest/bin/python tests/environments/run_solutions.py
	$(ENVS)/oldest/bin/pytest -p no:cacheprovider \
		tests/test_launcher.py tests/test_launcher_cleanup.py tests/test_launcher_diagnosis.py \
		tests/test_launcher_in_kernel.py tests/test_launcher_results.py

lint: $(VENV)/.installed-dev
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

# Instructors: regenerate the student release notebooks/ from solutions/ (see the README).
release: $(VENV)/.installed-dev
	$(BIN)/python -m grading.release

# Instructors: what a graded class's students receive (no solutions, no hidden tests).
#   make distribution DEST=../course-for-students
distribution: $(VENV)/.installed-dev
	$(BIN)/python -m grading.distribution $(DEST)

# Instructors: grade every student's submission of an assignment, JOBS at a time.
#   make grade ASSIGNMENT=02-collectives JOBS=2
JOBS ?= 1
grade: $(VENV)/.installed-dev
	$(BIN)/python -m grading.grade_class $(ASSIGNMENT) --jobs $(JOBS)

$(VENV)/.installed-%: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "$(TORCH)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/pip install --quiet -e ".[$*]"
	touch $@
