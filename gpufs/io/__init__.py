"""Files: ``model_io`` (model files: the envelope, the version, the codecs'
registry, save_model / load_model), ``_strict_json`` (strict JSON in and out, the
caps, typed field readers), ``_files`` (the rules of the files gpufs writes and
reads).
"""
