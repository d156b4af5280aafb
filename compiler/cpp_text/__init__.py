"""C++ text that both the code generator and the machine side (precompiled header, prebuilt vector math, size
variants' markers) use: plain text and its markers, importing no stage."""
