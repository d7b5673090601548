const deep = [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]];
const obj = {a:{a:{a:{a:{a:{a:{a:{a:{a:{a:{a:{a:{a:{a:{a:1}}}}}}}}}}}}}}};
type D = Array<Array<Array<Array<Array<Array<Array<Array<number>>>>>>>>;
((((((((((((((((((((1))))))))))))))))))));
