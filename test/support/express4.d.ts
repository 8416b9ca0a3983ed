// Express 4 under its test alias (package.json devDependencies); its API as @types/express describes it.
declare module 'express4' {
  import express from 'express';
  export default express;
}
