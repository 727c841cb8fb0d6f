"""Perf Study Workbench core library.

Imports flow one way: ``pages -> studies -> workbench``. Nothing in this package imports
streamlit, and GPU stacks (torch.cuda, triton, cupy) are imported inside functions so the
package loads on any machine.
"""

__version__ = "0.1.0"
