// placeholder: the binding lands with the Python package
