const a: number = ;
let b = (1 + ;
class { }
