"""holon's version: the one place it is written (pyproject.toml reads it from here).

A module of its own so that ``holon --version`` prints it without looking the installed
package up through :mod:`importlib.metadata`, a fifth of the command's start-up.
"""

__version__ = "0.1.0"
