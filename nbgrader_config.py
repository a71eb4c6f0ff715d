# nbgrader reads this file from the directory it runs in: run nbgrader from the repository root.
# The course's configuration lives in grading/nbgrader_config.py.
c = get_config()  # noqa: F821
load_subconfig("grading/nbgrader_config.py")  # noqa: F821
