export const x = 1;
import fs from "fs";
