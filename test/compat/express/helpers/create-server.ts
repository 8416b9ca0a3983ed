// Ported from express-rate-limit 3828a5b61c90e3134451ab32e88e61072dbf19f5,
// test/library/helpers/create-server.ts (unchanged but for formatting).
import createApp, { type Application, type Request, type RequestHandler, type Response } from 'express';

/** Create an Express server with the given middleware. */
export const createServer = (middleware: RequestHandler | RequestHandler[]): Application => {
  const app = createApp();
  app.use(middleware);
  app.all('/', (_request: Request, response: Response) => {
    response.send('Hi there!');
  });
  app.get('/error', (_request: Request, response: Response) => {
    response.sendStatus(400);
  });
  app.post('/crash', (_request: Request, response: Response) => {
    const error = new Error('Oops!');
    response.destroy(error);
    response.emit('error', error);
  });
  return app;
};
