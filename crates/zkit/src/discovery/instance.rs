//! The service instance as Curator's curator-x-discovery stores it: [`ServiceInstance`] (the
//! fields of Curator's `ServiceInstance`), [`ServiceType`], [`UriSpec`], and
//! [`JsonInstanceSerializer`], which writes and reads the exact JSON of Curator's
//! `JsonInstanceSerializer` (Jackson), so that Java and zkit processes see each other's
//! instances. Pure: no I/O.
//!
//! The JSON, field for field in Jackson's order (nulls written, as Jackson does by default):
//!
//! ```json
//! {"name":"api","id":"1f0c…","address":"10.0.0.1","port":8080,"sslPort":null,
//!  "payload":{"@class":"java.util.LinkedHashMap","zone":"a"},"registrationTimeUTC":1700000000000,
//!  "serviceType":"DYNAMIC","uriSpec":{"parts":[{"value":"scheme","variable":true},…]}}
//! ```
//!
//! - `enabled` is not written by default: Curator's `JsonInstanceSerializer(Class)` runs in its
//!   "compatible" mode (CURATOR-275) and leaves it out; readers treat a missing `enabled` as
//!   `true`. [`JsonInstanceSerializer::with_enabled_field`] writes it (Curator's
//!   `JsonInstanceSerializer(Class, false)`).
//! - The payload carries Jackson's type information (`@JsonTypeInfo(use = CLASS)` on
//!   `getPayload`): an object payload gets an `"@class"` property naming its Java class, an
//!   array payload is wrapped as `["java.util.ArrayList",[…]]`; strings, numbers and booleans
//!   are written as they are (Jackson's natural types). A Java reader casts the payload to its
//!   own payload class, so the `@class` must name a class it accepts: the default,
//!   `java.util.LinkedHashMap`, is what Curator itself writes for a `Map` payload and what a
//!   `ServiceDiscovery<Map>` or `ServiceDiscovery<Object>` reads; for a typed Java payload set
//!   its class name with [`JsonInstanceSerializer::with_payload_class`].
//! - Reading accepts what Jackson accepts: unknown properties are ignored, `@class` is
//!   stripped from object payloads (it is kept in [`ServiceInstance::payload_class`]), type
//!   wrapper arrays are unwrapped, and a payload without type information is taken as is.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The Java class Curator's Jackson writes for a `Map` payload (a serde map or struct reads as
/// one on the Java side).
pub const DEFAULT_PAYLOAD_CLASS: &str = "java.util.LinkedHashMap";
/// The Java class Jackson writes in the type wrapper of a list payload.
pub const LIST_PAYLOAD_CLASS: &str = "java.util.ArrayList";

/// How an instance is registered (Curator's `ServiceType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ServiceType {
    /// An ephemeral node: the instance goes with its session (and is registered again on the
    /// next one).
    #[default]
    Dynamic,
    /// A persistent node.
    Static,
    /// A persistent node (Curator does not treat it differently from `Static`).
    Permanent,
    /// An ephemeral sequential node: the node name is the id followed by a sequence number.
    DynamicSequential,
}

impl ServiceType {
    /// True for the ephemeral kinds (`Dynamic`, `DynamicSequential`).
    pub fn is_dynamic(self) -> bool {
        matches!(self, ServiceType::Dynamic | ServiceType::DynamicSequential)
    }

    /// The name Curator's `UriSpec` substitutes for `{service-type}` (lower case).
    pub fn lower_name(self) -> &'static str {
        match self {
            ServiceType::Dynamic => "dynamic",
            ServiceType::Static => "static",
            ServiceType::Permanent => "permanent",
            ServiceType::DynamicSequential => "dynamic_sequential",
        }
    }
}

/// One part of a [`UriSpec`]: literal text, or the name of a variable.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UriPart {
    /// The text, or the variable's name.
    #[serde(default)]
    pub value: String,
    /// Whether `value` names a variable.
    #[serde(default)]
    pub variable: bool,
}

/// A URI template (Curator's `UriSpec`): `"{scheme}://{address}:{port}/api"`. Variables are
/// `scheme` (`https` when the instance has an SSL port, else `http`), `name`, `id`, `address`,
/// `port`, `ssl-port`, `registration-time-utc`, `service-type`, and `[` / `]` for literal
/// braces; unknown variables build to nothing, as in Curator.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct UriSpec {
    /// The parts in order.
    #[serde(default)]
    pub parts: Vec<UriPart>,
}

impl UriSpec {
    /// Parses a template the way Curator's `UriSpec(String)` does (variable names are trimmed).
    ///
    /// # Errors
    /// [`Error::BadArguments`] for `{` inside a variable, `}` outside one, or an unclosed `{`.
    pub fn parse(raw: &str) -> Result<UriSpec> {
        let mut parts = Vec::new();
        let mut inside = false;
        let mut text = String::new();
        for c in raw.chars() {
            match c {
                '{' if inside => {
                    return Err(Error::BadArguments(format!(
                        "{{ is not allowed inside a variable: {raw:?}"
                    )))
                }
                '}' if !inside => {
                    return Err(Error::BadArguments(format!(
                        "}} must be preceded by {{: {raw:?}"
                    )))
                }
                '{' | '}' => {
                    if !text.is_empty() {
                        let value = std::mem::take(&mut text);
                        let value = if inside {
                            value.trim().to_string()
                        } else {
                            value
                        };
                        parts.push(UriPart {
                            value,
                            variable: inside,
                        });
                    }
                    inside = c == '{';
                }
                c => text.push(c),
            }
        }
        if inside {
            return Err(Error::BadArguments(format!(
                "final variable not closed, expected }}: {raw:?}"
            )));
        }
        if !text.is_empty() {
            parts.push(UriPart {
                value: text,
                variable: false,
            });
        }
        Ok(UriSpec { parts })
    }

    /// Builds the URI for `instance` (Curator's `UriSpec.build(instance)`).
    pub fn build<T>(&self, instance: &ServiceInstance<T>) -> String {
        let opt = |v: Option<u16>| v.map(|p| p.to_string()).unwrap_or_default();
        let mut out = String::new();
        for part in &self.parts {
            if !part.variable {
                out.push_str(&part.value);
                continue;
            }
            let value = match part.value.as_str() {
                "[" => "{".to_string(),
                "]" => "}".to_string(),
                "scheme" => if instance.ssl_port.is_some() {
                    "https"
                } else {
                    "http"
                }
                .into(),
                "name" => instance.name.clone(),
                "id" => instance.id.clone(),
                "address" => instance.address.clone().unwrap_or_default(),
                "port" => opt(instance.port),
                "ssl-port" => opt(instance.ssl_port),
                "registration-time-utc" => instance.registration_time_utc.to_string(),
                "service-type" => instance.service_type.lower_name().to_string(),
                // Curator logs "Variable not found" and leaves it out.
                _ => String::new(),
            };
            out.push_str(&value);
        }
        out
    }
}

/// A registered instance of a service (Curator's `ServiceInstance<T>`), with a typed payload.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceInstance<T = serde_json::Value> {
    /// The service's name (the node `/<base>/<name>`).
    pub name: String,
    /// This instance's id (the node name under the service), unique per service.
    pub id: String,
    /// Host or IP clients connect to.
    pub address: Option<String>,
    /// Plain port.
    pub port: Option<u16>,
    /// TLS port.
    pub ssl_port: Option<u16>,
    /// Application data.
    pub payload: Option<T>,
    /// The Java class named in the payload's type information as read (`None` when written by
    /// zkit before serialization, or when the payload carried none).
    pub payload_class: Option<String>,
    /// Registration time, milliseconds since the Unix epoch.
    pub registration_time_utc: i64,
    /// How it is registered.
    pub service_type: ServiceType,
    /// URI template.
    pub uri_spec: Option<UriSpec>,
    /// Whether clients should use it (providers skip disabled instances).
    pub enabled: bool,
}

impl<T> ServiceInstance<T> {
    /// A dynamic (ephemeral) instance of `name` with a fresh UUID id, registered now, enabled,
    /// with no address, ports or payload: set the fields you need.
    pub fn new(name: &str) -> Self {
        ServiceInstance {
            name: name.to_string(),
            id: uuid::Uuid::new_v4().to_string(),
            address: None,
            port: None,
            ssl_port: None,
            payload: None,
            payload_class: None,
            registration_time_utc: now_millis(),
            service_type: ServiceType::Dynamic,
            uri_spec: None,
            enabled: true,
        }
    }

    /// Sets the address.
    pub fn with_address(mut self, address: impl Into<String>) -> Self {
        self.address = Some(address.into());
        self
    }

    /// Sets the port.
    pub fn with_port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    /// Sets the SSL port.
    pub fn with_ssl_port(mut self, port: u16) -> Self {
        self.ssl_port = Some(port);
        self
    }

    /// Sets the id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Sets the payload.
    pub fn with_payload(mut self, payload: T) -> Self {
        self.payload = Some(payload);
        self
    }

    /// Sets the service type.
    pub fn with_service_type(mut self, service_type: ServiceType) -> Self {
        self.service_type = service_type;
        self
    }

    /// Sets the URI template.
    pub fn with_uri_spec(mut self, spec: UriSpec) -> Self {
        self.uri_spec = Some(spec);
        self
    }

    /// The URI built from [`ServiceInstance::uri_spec`] (empty without one).
    pub fn build_uri(&self) -> String {
        self.uri_spec
            .as_ref()
            .map(|spec| spec.build(self))
            .unwrap_or_default()
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Writes and reads instances as Curator's `JsonInstanceSerializer` does. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonInstanceSerializer {
    payload_class: Option<String>,
    enabled_field: bool,
}

impl Default for JsonInstanceSerializer {
    fn default() -> Self {
        JsonInstanceSerializer {
            payload_class: Some(DEFAULT_PAYLOAD_CLASS.to_string()),
            enabled_field: false,
        }
    }
}

/// The fields as read; the payload stays JSON until typed.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawInstance {
    #[serde(default)]
    name: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    port: Option<u16>,
    #[serde(default)]
    ssl_port: Option<u16>,
    #[serde(default)]
    payload: Option<serde_json::Value>,
    #[serde(default, rename = "registrationTimeUTC")]
    registration_time_utc: i64,
    #[serde(default)]
    service_type: Option<ServiceType>,
    #[serde(default)]
    uri_spec: Option<UriSpec>,
    #[serde(default)]
    enabled: Option<bool>,
}

impl JsonInstanceSerializer {
    /// Curator's default: object payloads typed as `java.util.LinkedHashMap`, no `enabled`.
    pub fn new() -> Self {
        JsonInstanceSerializer::default()
    }

    /// Names the Java class of object payloads (what a Java `ServiceDiscovery<ThatClass>`
    /// expects in `@class`); `None` writes payloads without type information (Jackson then
    /// reads objects as maps: fine for `ServiceDiscovery<Map>`/`<Object>`, not for a typed one).
    pub fn with_payload_class(mut self, class: Option<&str>) -> Self {
        self.payload_class = class.map(str::to_string);
        self
    }

    /// Writes the `enabled` field (Curator's `JsonInstanceSerializer(Class, false)`); older
    /// Curator readers (before CURATOR-275) fail on it when they fail on unknown properties.
    pub fn with_enabled_field(mut self, write: bool) -> Self {
        self.enabled_field = write;
        self
    }

    /// The Java class written for object payloads.
    pub fn payload_class(&self) -> Option<&str> {
        self.payload_class.as_deref()
    }

    /// The instance as Curator's JSON (see the module docs for the shape).
    ///
    /// # Errors
    /// [`Error::BadArguments`] when the payload does not serialize to JSON.
    pub fn serialize<T: Serialize>(&self, instance: &ServiceInstance<T>) -> Result<Vec<u8>> {
        let mut out = String::with_capacity(256);
        out.push('{');
        let mut field = |name: &str, value: String| {
            if out.len() > 1 {
                out.push(',');
            }
            out.push('"');
            out.push_str(name);
            out.push_str("\":");
            out.push_str(&value);
        };
        field("name", json(&instance.name)?);
        field("id", json(&instance.id)?);
        field("address", json(&instance.address)?);
        field("port", json(&instance.port)?);
        field("sslPort", json(&instance.ssl_port)?);
        let payload = match &instance.payload {
            None => "null".to_string(),
            Some(payload) => {
                let text = serde_json::to_string(payload).map_err(|e| {
                    Error::BadArguments(format!("the payload does not serialize to JSON: {e}"))
                })?;
                let class = instance
                    .payload_class
                    .as_deref()
                    .or(self.payload_class.as_deref());
                typed_payload(&text, class)
            }
        };
        field("payload", payload);
        field(
            "registrationTimeUTC",
            instance.registration_time_utc.to_string(),
        );
        field("serviceType", json(&instance.service_type)?);
        field("uriSpec", json(&instance.uri_spec)?);
        if self.enabled_field {
            field("enabled", json(&instance.enabled)?);
        }
        out.push('}');
        Ok(out.into_bytes())
    }

    /// Reads an instance written by Curator or by zkit.
    ///
    /// # Errors
    /// [`Error::Unexpected`] when the bytes are not an instance's JSON, or the payload does not
    /// deserialize into `T` (Curator's `ClassCastException`).
    pub fn deserialize<T: DeserializeOwned>(&self, bytes: &[u8]) -> Result<ServiceInstance<T>> {
        let raw: RawInstance = serde_json::from_slice(bytes)
            .map_err(|e| Error::Unexpected(format!("not a service instance: {e}")))?;
        let (payload, payload_class) = match raw.payload {
            None | Some(serde_json::Value::Null) => (None, None),
            Some(value) => {
                let (value, class) = untyped_payload(value);
                let payload = serde_json::from_value(value).map_err(|e| {
                    Error::Unexpected(format!(
                        "payload of instance {:?} of {:?} is not the expected type: {e}",
                        raw.id, raw.name
                    ))
                })?;
                (Some(payload), class)
            }
        };
        Ok(ServiceInstance {
            name: raw.name,
            id: raw.id,
            address: raw.address,
            port: raw.port,
            ssl_port: raw.ssl_port,
            payload,
            payload_class,
            registration_time_utc: raw.registration_time_utc,
            service_type: raw.service_type.unwrap_or_default(),
            uri_spec: raw.uri_spec,
            enabled: raw.enabled.unwrap_or(true),
        })
    }
}

/// Adds Jackson's type information to a payload's JSON text (see the module docs).
fn typed_payload(text: &str, class: Option<&str>) -> String {
    let Some(class) = class else {
        return text.to_string();
    };
    let class_json = serde_json::Value::String(class.to_string()).to_string();
    let trimmed = text.trim_start();
    if let Some(rest) = trimmed.strip_prefix('{') {
        // Insert `"@class"` first, keeping the payload's own field order.
        if rest.trim_start().starts_with('}') {
            format!("{{\"@class\":{class_json}}}")
        } else {
            format!("{{\"@class\":{class_json},{rest}")
        }
    } else if trimmed.starts_with('[') {
        let list = serde_json::Value::String(LIST_PAYLOAD_CLASS.to_string()).to_string();
        format!("[{list},{text}]")
    } else {
        // Strings, numbers, booleans: Jackson writes natural types without type information.
        text.to_string()
    }
}

/// Strips Jackson's type information: `@class` from an object, the `[class, value]` wrapper of
/// anything else. Returns the bare value and the class.
fn untyped_payload(value: serde_json::Value) -> (serde_json::Value, Option<String>) {
    match value {
        serde_json::Value::Object(mut map) => {
            let class = match map.remove("@class") {
                Some(serde_json::Value::String(class)) => Some(class),
                Some(other) => {
                    // Not type information after all: keep it.
                    map.insert("@class".to_string(), other);
                    None
                }
                None => None,
            };
            (serde_json::Value::Object(map), class)
        }
        serde_json::Value::Array(items) if is_type_wrapper(&items) => {
            let mut items = items.into_iter();
            let class = items.next().and_then(|c| c.as_str().map(str::to_string));
            (items.next().unwrap_or(serde_json::Value::Null), class)
        }
        other => (other, None),
    }
}

/// Jackson's `WRAPPER_ARRAY` form: a Java class name and the value.
fn is_type_wrapper(items: &[serde_json::Value]) -> bool {
    let [serde_json::Value::String(class), _] = items else {
        return false;
    };
    // A fully qualified Java class name: dotted identifiers.
    class.contains('.')
        && class.split('.').all(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
                && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '$')
        })
}

/// JSON text of a plain field value.
fn json<V: Serialize + ?Sized>(value: &V) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Error::BadArguments(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Details {
        description: String,
        weight: i32,
    }

    fn sample() -> ServiceInstance<Details> {
        ServiceInstance {
            name: "svc".into(),
            id: "id-1".into(),
            address: Some("10.0.0.1".into()),
            port: Some(8080),
            ssl_port: None,
            payload: Some(Details {
                description: "hello".into(),
                weight: 3,
            }),
            payload_class: None,
            registration_time_utc: 1_700_000_000_000,
            service_type: ServiceType::Dynamic,
            uri_spec: Some(UriSpec::parse("{scheme}://{address}:{port}/x").unwrap()),
            enabled: true,
        }
    }

    /// Byte for byte what Curator 5.4's `JsonInstanceSerializer` writes for the same instance
    /// (captured from Java with Debian's curator-x-discovery and Jackson 2.14).
    const CURATOR_JSON: &str = r#"{"name":"svc","id":"id-1","address":"10.0.0.1","port":8080,"sslPort":null,"payload":{"@class":"Probe$Details","description":"hello","weight":3},"registrationTimeUTC":1700000000000,"serviceType":"DYNAMIC","uriSpec":{"parts":[{"value":"scheme","variable":true},{"value":"://","variable":false},{"value":"address","variable":true},{"value":":","variable":false},{"value":"port","variable":true},{"value":"/x","variable":false}]}}"#;

    #[test]
    fn writes_curators_exact_json() {
        let serializer = JsonInstanceSerializer::new().with_payload_class(Some("Probe$Details"));
        let bytes = serializer.serialize(&sample()).unwrap();
        assert_eq!(std::str::from_utf8(&bytes).unwrap(), CURATOR_JSON);
        // The non-compatible mode appends `enabled`, as Curator's does.
        let with_enabled = serializer
            .with_enabled_field(true)
            .serialize(&sample())
            .unwrap();
        let text = String::from_utf8(with_enabled).unwrap();
        assert_eq!(
            text,
            format!(
                "{},\"enabled\":true}}",
                &CURATOR_JSON[..CURATOR_JSON.len() - 1]
            )
        );
    }

    #[test]
    fn payload_type_information_like_jackson() {
        let s = JsonInstanceSerializer::new();
        let mut i: ServiceInstance<serde_json::Value> = ServiceInstance::new("svc");
        i.payload = Some(serde_json::json!("text"));
        let text = String::from_utf8(s.serialize(&i).unwrap()).unwrap();
        assert!(text.contains(r#""payload":"text""#), "{text}");
        i.payload = Some(serde_json::json!(7));
        let text = String::from_utf8(s.serialize(&i).unwrap()).unwrap();
        assert!(text.contains(r#""payload":7,"#), "{text}");
        i.payload = Some(serde_json::json!([1, "x"]));
        let text = String::from_utf8(s.serialize(&i).unwrap()).unwrap();
        assert!(
            text.contains(r#""payload":["java.util.ArrayList",[1,"x"]]"#),
            "{text}"
        );
        i.payload = Some(serde_json::json!({}));
        let text = String::from_utf8(s.serialize(&i).unwrap()).unwrap();
        assert!(
            text.contains(r#""payload":{"@class":"java.util.LinkedHashMap"}"#),
            "{text}"
        );
        i.payload = None;
        let text = String::from_utf8(s.serialize(&i).unwrap()).unwrap();
        assert!(text.contains(r#""payload":null,"#), "{text}");
        // Without a payload class nothing is added.
        i.payload = Some(serde_json::json!({"k": 1}));
        let plain = JsonInstanceSerializer::new().with_payload_class(None);
        let text = String::from_utf8(plain.serialize(&i).unwrap()).unwrap();
        assert!(text.contains(r#""payload":{"k":1}"#), "{text}");
    }

    #[test]
    fn reads_curator_json_and_round_trips() {
        let s = JsonInstanceSerializer::new();
        let read: ServiceInstance<Details> = s.deserialize(CURATOR_JSON.as_bytes()).unwrap();
        let mut want = sample();
        want.payload_class = Some("Probe$Details".into());
        assert_eq!(read, want);
        assert_eq!(read.build_uri(), "http://10.0.0.1:8080/x");
        let again: ServiceInstance<Details> = s.deserialize(&s.serialize(&read).unwrap()).unwrap();
        assert_eq!(again, read);

        // What Jackson also accepts: missing fields, unknown ones, wrapper arrays, no @class.
        let minimal: ServiceInstance<serde_json::Value> = s
            .deserialize(br#"{"name":"svc","id":"x","future":1}"#)
            .unwrap();
        assert_eq!(minimal.payload, None);
        assert_eq!(minimal.service_type, ServiceType::Dynamic);
        assert!(minimal.enabled);
        let wrapped: ServiceInstance<String> = s
            .deserialize(br#"{"name":"svc","id":"x","payload":["java.lang.String","str"]}"#)
            .unwrap();
        assert_eq!(wrapped.payload.as_deref(), Some("str"));
        assert_eq!(wrapped.payload_class.as_deref(), Some("java.lang.String"));
        let bare: ServiceInstance<serde_json::Value> = s
            .deserialize(br#"{"name":"svc","id":"x","payload":["a b",1],"enabled":false,"serviceType":"STATIC"}"#)
            .unwrap();
        assert_eq!(
            bare.payload,
            Some(serde_json::json!(["a b", 1])),
            "not a class name"
        );
        assert!(!bare.enabled);
        assert_eq!(bare.service_type, ServiceType::Static);
        // Wrong payload type and garbage are errors, not panics.
        assert!(s
            .deserialize::<Details>(br#"{"name":"svc","id":"x","payload":"str"}"#)
            .is_err());
        assert!(s.deserialize::<Details>(b"\xff\x00").is_err());
        assert!(s
            .deserialize::<Details>(br#"{"name":"svc","port":70000}"#)
            .is_err());
    }

    #[test]
    fn uri_specs_parse_and_build_like_curator() {
        let spec = UriSpec::parse("{scheme}://foo.com:{port}/{[}x{]}{missing}").unwrap();
        let i: ServiceInstance<()> = ServiceInstance::new("svc").with_ssl_port(443);
        // Curator 5.4 builds "https://foo.com:/{x}" for the same instance (no port).
        assert_eq!(spec.build(&i), "https://foo.com:/{x}");
        let spec = UriSpec::parse("{ name }-{service-type}").unwrap();
        assert_eq!(spec.parts[0].value, "name");
        assert_eq!(spec.build(&i), "svc-dynamic");
        for bad in ["{a{b}}", "a}", "{open"] {
            assert!(UriSpec::parse(bad).is_err(), "{bad}");
        }
    }
}
