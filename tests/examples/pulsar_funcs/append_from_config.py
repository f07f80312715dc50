"""Pulsar's config_based_append_function, rewritten: the suffix comes from user config."""

from pulsar import Function


class AppendFromConfig(Function):
    def process(self, input, context):
        suffix = "!"
        if "suffix" in context.get_user_config_map():
            suffix = context.get_user_config_value("suffix")
        return input + str(suffix)
