"""The Typer CLI: thin commands that parse options, build one options object, call one
library function and render its report."""
