"""Importers: models trained elsewhere -> ordinary nmt run directories."""

# What `nmt import hf` reads (named in its --help and in its refusals); kept here, free of torch,
# so the CLI can say it without loading the importer.
SUPPORTED = "MarianMTModel (model_type 'marian', e.g. Helsinki-NLP/opus-mt-*)"
