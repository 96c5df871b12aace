"""One screen per module. `registry.SCREENS` maps `:name` commands to screen factories, which is
how a new screen (the doctor screen, for one) joins navigation, the palette and the help."""
