"""A small shop whose category pages list their products with JavaScript: the adaptive example's site."""
