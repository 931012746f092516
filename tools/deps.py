"""Print requirements from pyproject.toml, one per line.

With no argument: the package's runtime and test requirements (used by `make venv`, so the
dependency list lives only in pyproject.toml). With extras' names (`tools/deps.py lint`): only
those optional-dependency groups.
"""
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - older Pythons get tomli from `make venv`
    import tomli as tomllib

with open("pyproject.toml", "rb") as f:
    project = tomllib.load(f)["project"]
extras = project["optional-dependencies"]
unknown = [name for name in sys.argv[1:] if name not in extras]
if unknown:
    sys.exit(f"tools/deps.py: no optional-dependency group {unknown[0]!r} in pyproject.toml (have: {', '.join(extras)})")
groups = sys.argv[1:] or ["test"]
reqs = [] if sys.argv[1:] else list(project["dependencies"])
for name in groups:
    reqs += extras[name]
for req in reqs:
    print(req)
