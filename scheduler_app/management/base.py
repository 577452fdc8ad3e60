"""The scheduler's commands: argument errors are one line on stderr and exit code 2.

argparse prints the whole usage text before an error; a person who typed
``--priority 500`` needs the one line that says what is wrong. Errors found
in ``handle`` are ``CommandError(..., returncode=2)``, which Django prints as
one line too.
"""

from django.core.management.base import BaseCommand, CommandParser


class OneLineErrorParser(CommandParser):
    def error(self, message):
        if self.called_from_command_line:
            self.exit(2, f"{self.prog}: error: {message}\n")
        super().error(message)  # raises CommandError for call_command()


class SchedulerCommand(BaseCommand):
    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.__class__ = OneLineErrorParser
        return parser
