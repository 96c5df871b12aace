"""One module per migration step, named by its position and purpose."""
