"""Where make install put libhcomm (None from a source tree or pip)."""
LIBDIR = None
