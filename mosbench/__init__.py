"""mosbench: does this kernel and this application scale with cores, and if not, where is the bottleneck?"""

__version__ = "0.1.0"
