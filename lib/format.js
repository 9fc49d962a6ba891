'use strict';
// Human-readable renderings of frames and close reasons, for error messages.

const { format } = require('node:util');
const defs = require('./defs');
const { HEARTBEAT } = require('./frame');

function closeMessage(close) {
  const code = close.fields.replyCode;
  return format('%d (%s) with message "%s"', code, defs.constant_strs[code], close.fields.replyText);
}

function methodName(id) {
  return defs.info(id).name;
}

function inspect(frame, showFields) {
  if (frame === HEARTBEAT) return '<Heartbeat>';
  if (!frame.id) return format('<Content channel:%d size:%d>', frame.channel, frame.size);
  const fields = showFields ? ` ${JSON.stringify(frame.fields, undefined, 2)}` : '';
  return format('<%s channel:%d%s>', defs.info(frame.id).name, frame.channel, fields);
}

module.exports = { closeMessage, methodName, inspect };
