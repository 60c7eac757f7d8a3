// placeholder: math/{exp,tanh,sigmoid,erf}/{fuse,eigen}
