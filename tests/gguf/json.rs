//! A minimal JSON reader (numbers kept as text) for the manifest and gguf-py's
//! dumps, and SHA-256 for the fixtures' and tensors' digests.

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum J {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

impl J {
    pub(crate) fn parse(s: &str) -> J {
        let (v, rest) = J::value(s.trim_start());
        assert!(rest.trim().is_empty(), "trailing JSON: {:.40}", rest);
        v
    }
    fn value(s: &str) -> (J, &str) {
        let s = s.trim_start();
        let lit = |w: &str, v: J| (v, &s[w.len()..]);
        match s.as_bytes()[0] {
            b'n' => lit("null", J::Null),
            b't' => lit("true", J::Bool(true)),
            b'f' => lit("false", J::Bool(false)),
            b'"' => {
                let (st, rest) = J::string(&s[1..]);
                (J::Str(st), rest)
            }
            open @ (b'[' | b'{') => {
                let (mut items, mut fields, mut s) = (vec![], vec![], s[1..].trim_start());
                let close = if open == b'[' { ']' } else { '}' };
                while !s.starts_with(close) {
                    if open == b'[' {
                        let (v, r) = J::value(s);
                        items.push(v);
                        s = r.trim_start();
                    } else {
                        let (k, r) = J::string(&s.trim_start()[1..]);
                        let (v, r) = J::value(r.trim_start().strip_prefix(':').unwrap());
                        fields.push((k, v));
                        s = r.trim_start();
                    }
                    s = s.strip_prefix(',').unwrap_or(s).trim_start();
                }
                (if open == b'[' { J::Arr(items) } else { J::Obj(fields) }, &s[1..])
            }
            _ => {
                let end = s.find(|c: char| !"+-.eE0123456789".contains(c)).unwrap_or(s.len());
                (J::Num(s[..end].to_string()), &s[end..])
            }
        }
    }
    /// A string body after its opening quote; returns the rest after the closing quote.
    fn string(s: &str) -> (String, &str) {
        let (mut out, mut it) = (String::new(), s.char_indices());
        let mut pending_high: Option<u32> = None;
        while let Some((i, c)) = it.next() {
            match c {
                '"' => return (out, &s[i + 1..]),
                '\\' => {
                    let e = it.next().unwrap().1;
                    let simple = match e {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        'b' => '\u{8}',
                        'f' => '\u{c}',
                        'u' => {
                            let hex: String = (0..4).map(|_| it.next().unwrap().1).collect();
                            let u = u32::from_str_radix(&hex, 16).unwrap();
                            if (0xD800..0xDC00).contains(&u) {
                                pending_high = Some(u);
                                continue;
                            }
                            let u = match pending_high.take() {
                                Some(h) => 0x10000 + ((h - 0xD800) << 10) + (u - 0xDC00),
                                None => u,
                            };
                            char::from_u32(u).unwrap()
                        }
                        other => other,
                    };
                    out.push(simple);
                }
                c => out.push(c),
            }
        }
        panic!("unterminated JSON string")
    }
    pub(crate) fn get(&self, key: &str) -> Option<&J> {
        match self {
            J::Obj(f) => f.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    pub(crate) fn at(&self, key: &str) -> &J {
        self.get(key).unwrap_or_else(|| panic!("no key {key}"))
    }
    pub(crate) fn str(&self) -> &str {
        match self {
            J::Str(s) => s,
            j => panic!("not a string: {j:?}"),
        }
    }
    pub(crate) fn arr(&self) -> &[J] {
        match self {
            J::Arr(a) => a,
            j => panic!("not an array: {j:?}"),
        }
    }
    pub(crate) fn int(&self) -> i128 {
        match self {
            J::Num(n) => n.parse().unwrap_or_else(|_| panic!("not an integer: {n}")),
            j => panic!("not a number: {j:?}"),
        }
    }
}

pub(crate) fn sha256_hex(data: &[u8]) -> String {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
        0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
        0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
        0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
        0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
        0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
        0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] =
        [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
    let mut msg = data.to_vec();
    msg.push(0x80);
    msg.resize((data.len() + 9).div_ceil(64) * 64, 0);
    let n = msg.len();
    msg[n - 8..].copy_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in msg.chunks(64) {
        let mut w = [0u32; 64];
        for i in 0..64 {
            w[i] = if i < 16 {
                u32::from_be_bytes(block[4 * i..4 * i + 4].try_into().unwrap())
            } else {
                let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
                let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
                w[i - 16].wrapping_add(s0).wrapping_add(w[i - 7]).wrapping_add(s1)
            };
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7].wrapping_add(s1).wrapping_add(ch).wrapping_add(K[i]).wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let t2 = s0.wrapping_add((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
            v = [t1.wrapping_add(t2), v[0], v[1], v[2], v[3].wrapping_add(t1), v[4], v[5], v[6]];
        }
        h.iter_mut().zip(v).for_each(|(a, b)| *a = a.wrapping_add(b));
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}

#[test]
fn sha256_known_answers() {
    assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    let long = sha256_hex(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq");
    assert_eq!(long, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    assert_eq!(sha256_hex(&[b'a'; 63]), "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34");
}
