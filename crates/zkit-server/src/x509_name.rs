//! The `x509` identity of a TLS client: the subject of its certificate as a string, exactly as
//! Apache's `X509AuthenticationProvider.getClientId` makes it
//! (`X509Certificate.getSubjectX500Principal().getName()`, i.e. Java's RFC 2253 form).
//!
//! Java's rules (`sun.security.x509.AVA.toRFC2253String`, `RDN`, `X500Name`): the RDNs in
//! reverse order of the certificate's encoding, joined by `,`; the attributes of a
//! multi-valued RDN joined by `+`; the keywords `CN C L ST O OU STREET DC UID` for their OIDs
//! and the dotted OID for any other attribute; a value after a dotted OID, or one that is not
//! a string type, as `#` and the lowercase hex of its DER encoding; otherwise the string with
//! `, = + < > # ; " \` escaped by a backslash, NUL as `\00`, and leading and trailing spaces
//! (and carriage returns) escaped.
//!
//! Pure: a checked reader over the DER bytes of a certificate; malformed input is `None`,
//! never a panic.

/// The subject of a DER-encoded X.509 certificate in Java's RFC 2253 form, or `None` when the
/// certificate does not parse.
pub(crate) fn subject_rfc2253(cert_der: &[u8]) -> Option<String> {
    let (tag, cert, _) = tlv(cert_der)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, tbs, _) = tlv(cert)?;
    if tag != SEQUENCE {
        return None;
    }
    let mut rest = tbs;
    // version [0] EXPLICIT (optional), serialNumber, signature, issuer, validity, subject.
    let (tag, _, after) = tlv(rest)?;
    if tag == VERSION {
        rest = after;
    }
    for _ in 0..4 {
        rest = tlv(rest)?.2;
    }
    let (tag, subject, _) = tlv(rest)?;
    if tag != SEQUENCE {
        return None;
    }
    name_rfc2253(subject)
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
const VERSION: u8 = 0xa0;

/// The contents of a Name (a SEQUENCE OF RelativeDistinguishedName) in RFC 2253 form.
fn name_rfc2253(mut name: &[u8]) -> Option<String> {
    let mut rdns = Vec::new();
    while !name.is_empty() {
        let (tag, rdn, rest) = tlv(name)?;
        if tag != SET {
            return None;
        }
        name = rest;
        let mut avas = Vec::new();
        let mut set = rdn;
        while !set.is_empty() {
            let (tag, ava, rest) = tlv(set)?;
            if tag != SEQUENCE {
                return None;
            }
            set = rest;
            avas.push(ava_rfc2253(ava)?);
        }
        rdns.push(avas.join("+"));
    }
    rdns.reverse();
    Some(rdns.join(","))
}

/// One AttributeTypeAndValue: `keyword=value`.
fn ava_rfc2253(ava: &[u8]) -> Option<String> {
    let (tag, oid, rest) = tlv(ava)?;
    if tag != OID {
        return None;
    }
    let oid = dotted(oid)?;
    let (value_tag, value, after) = tlv(rest)?;
    if !after.is_empty() {
        return None;
    }
    let encoded = &rest[..rest.len() - after.len()];
    let keyword = keyword(&oid);
    let mut out = String::from(keyword.unwrap_or(&oid));
    out.push('=');
    // DerValue tags Java treats as strings (AVA.isDerString, non-canonical).
    const STRING_TAGS: [u8; 6] = [0x13, 0x14, 0x16, 0x1b, 0x0c, 0x1e];
    if keyword.is_none() || !STRING_TAGS.contains(&value_tag) {
        out.push('#');
        for b in encoded {
            out.push_str(&format!("{b:02x}"));
        }
        return Some(out);
    }
    let text = if value_tag == 0x1e {
        // BMPString: UTF-16BE.
        let units: Vec<u16> = value
            .chunks(2)
            .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))
            .collect();
        String::from_utf16_lossy(&units)
    } else {
        String::from_utf8_lossy(value).into_owned()
    };
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            ',' | '=' | '+' | '<' | '>' | '#' | ';' | '"' | '\\' => {
                escaped.push('\\');
                escaped.push(c);
            }
            '\0' => escaped.push_str("\\00"),
            _ => escaped.push(c),
        }
    }
    // Leading and trailing spaces and carriage returns are escaped, one backslash each.
    let chars: Vec<char> = escaped.chars().collect();
    let blank = |c: &char| *c == ' ' || *c == '\r';
    let lead = chars.iter().take_while(|c| blank(c)).count();
    let trail = chars.len() - chars.iter().rev().take_while(|c| blank(c)).count();
    for (i, c) in chars.iter().enumerate() {
        if i < lead || i >= trail.max(lead) {
            out.push('\\');
        }
        out.push(*c);
    }
    Some(out)
}

/// The RFC 2253 keywords Java uses (`AVAKeyword` entries marked RFC 2253 compliant).
fn keyword(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.9" => "STREET",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

/// An OBJECT IDENTIFIER's contents in dotted form.
fn dotted(bytes: &[u8]) -> Option<String> {
    let mut arcs: Vec<u64> = Vec::new();
    let mut value: u64 = 0;
    for (i, b) in bytes.iter().enumerate() {
        value = value.checked_mul(128)? | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (value / 40).min(2);
                arcs.push(first);
                arcs.push(value - first * 40);
            } else {
                arcs.push(value);
            }
            value = 0;
        } else if i + 1 == bytes.len() {
            return None;
        }
    }
    if arcs.is_empty() {
        return None;
    }
    Some(
        arcs.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join("."),
    )
}

/// One DER tag-length-value: `(tag, contents, the bytes after it)`. Only single-byte tags
/// (all that certificates' names use) and definite lengths.
fn tlv(bytes: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = bytes.split_first()?;
    if tag & 0x1f == 0x1f {
        return None;
    }
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        let mut len = 0usize;
        for _ in 0..n {
            let (&b, r) = rest.split_first()?;
            len = (len << 8) | usize::from(b);
            rest = r;
        }
        len
    };
    if rest.len() < len {
        return None;
    }
    let (contents, after) = rest.split_at(len);
    Some((tag, contents, after))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(tag: u8, parts: &[&[u8]]) -> Vec<u8> {
        let body: Vec<u8> = parts.concat();
        let mut out = vec![tag];
        if body.len() < 0x80 {
            out.push(body.len() as u8);
        } else {
            out.push(0x82);
            out.extend_from_slice(&(body.len() as u16).to_be_bytes());
        }
        out.extend(body);
        out
    }

    fn ava(oid: &[u8], tag: u8, value: &str) -> Vec<u8> {
        seq(
            SEQUENCE,
            &[&seq(OID, &[oid]), &seq(tag, &[value.as_bytes()])],
        )
    }

    const CN: &[u8] = &[0x55, 0x04, 0x03];
    const O: &[u8] = &[0x55, 0x04, 0x0a];
    const C: &[u8] = &[0x55, 0x04, 0x06];
    const EMAIL: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01];

    #[test]
    fn names_read_as_java_writes_them() {
        let name = [
            seq(SET, &[&ava(C, 0x13, "US")]),
            seq(SET, &[&ava(O, 0x0c, "Acme, Inc.")]),
            seq(SET, &[&ava(CN, 0x0c, " a=b+c#"), &ava(EMAIL, 0x16, "a@b")]),
        ]
        .concat();
        assert_eq!(
            name_rfc2253(&name).unwrap(),
            "CN=\\ a\\=b\\+c\\#+1.2.840.113549.1.9.1=#1603614062,O=Acme\\, Inc.,C=US"
        );
        assert_eq!(name_rfc2253(&[]).unwrap(), "");
        assert_eq!(dotted(EMAIL).unwrap(), "1.2.840.113549.1.9.1");
        assert_eq!(dotted(CN).unwrap(), "2.5.4.3");
    }

    #[test]
    fn trailing_blanks_are_escaped() {
        let name = seq(SET, &[&ava(CN, 0x0c, "x  ")]);
        assert_eq!(name_rfc2253(&name).unwrap(), "CN=x\\ \\ ");
        let name = seq(SET, &[&ava(CN, 0x0c, "   ")]);
        assert_eq!(name_rfc2253(&name).unwrap(), "CN=\\ \\ \\ ");
    }

    #[test]
    fn malformed_input_is_none() {
        for bad in [
            &[][..],
            &[0x30],
            &[0x30, 0x05, 0x30],
            &[0x30, 0x84, 0xff, 0xff],
        ] {
            assert_eq!(subject_rfc2253(bad), None);
        }
        // Truncated everywhere: never a panic.
        let name = seq(SET, &[&ava(CN, 0x0c, "client")]);
        for cut in 0..name.len() {
            let _ = name_rfc2253(&name[..cut]);
        }
    }
}
