"""Print the package's runtime and test requirements from pyproject.toml, one per line.

Used by `make venv` so the dependency list lives only in pyproject.toml.
"""
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - older Pythons get tomli from `make venv`
    import tomli as tomllib

with open("pyproject.toml", "rb") as f:
    project = tomllib.load(f)["project"]
for req in project["dependencies"] + project["optional-dependencies"]["test"]:
    print(req)
