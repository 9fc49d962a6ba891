// ES module entry point for the callback API: the very objects of
// callback_api.js.
import api from './callback_api.js';

export default api;
export const { connect, credentials, IllegalOperationError } = api;
