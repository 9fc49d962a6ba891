'use strict';
// The protocol definitions under the names amqplib's lib/defs.js exports: method and
// properties ids, their descriptions (`info`), constants, and the codec entry points, all
// backed by the native core (the codec's in development builds only: lib/codec_exports.js).

const { codecExport } = require('./codec_exports');
const spec = require('./spec');
const { TapeReader } = require('./tape');

const defs = {
  constants: spec.constants,
  constant_strs: spec.constant_strs,
  FRAME_OVERHEAD: 8,
};

const infoById = new Map();
for (const method of spec.methods) {
  const info = { id: method.id, classId: method.classId, methodId: method.methodId, name: method.name, args: method.args };
  defs[method.name] = method.id;
  defs[`methodInfo${method.name}`] = info;
  infoById.set(method.id, info);
}
const propertyClasses = new Set();
for (const props of spec.properties) {
  const info = { id: props.id, name: props.name, args: props.args };
  defs[props.name] = props.id;
  defs[`propertiesInfo${props.name}`] = info;
  infoById.set(props.id, info);
  propertyClasses.add(props.id);
}

defs.info = (id) => infoById.get(id);

defs.encodeMethod = (id, channel, fields) => codecExport('encodeMethod')(id, channel, fields);

defs.encodeProperties = (id, channel, size, fields) => codecExport('encodeProperties')(id, channel, size, fields);

// Decodes method arguments (the payload after the method id), or content properties (the
// flags and values after the body size) when `id` is a properties class.
defs.decode = (id, buf) => {
  const reader = new TapeReader();
  if (propertyClasses.has(id)) {
    const decoded = codecExport('decodeProperties')(id, buf);
    return reader.properties(id, decoded[0], reader.load(...decoded));
  }
  const decoded = codecExport('decodeMethod')(id, buf);
  return reader.methodFields(id, decoded[0], reader.load(...decoded));
};

module.exports = defs;
