"""One module per ``fwd9m`` subcommand: ``HELP``, ``add_arguments(parser)``, ``run(args)``."""
