// ES module entry point for the promise API: the very objects of index.js.
import api from './index.js';

export default api;
export const { connect, credentials, IllegalOperationError } = api;
