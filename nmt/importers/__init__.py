"""Importers: models trained elsewhere -> ordinary nmt run directories."""
