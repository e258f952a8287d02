//! The DATA body reader: dot-unstuffing, the end-of-data mark and the size limit.

/// Collects a DATA body from the bytes the client sends.
///
/// Only `<CRLF>.<CRLF>` ends the body and only a dot after CRLF is unstuffed: treating a bare LF as a
/// line end here is what makes "SMTP smuggling" possible, where a second message hides inside the first.
pub(crate) struct DataReader {
    at_line_start: bool,
    body: Vec<u8>,
    limit: usize,
    oversize: bool,
}

/// What [`DataReader::feed`] found in the bytes it was given.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Feed {
    /// Everything usable was consumed; more bytes are needed.
    NeedMore { consumed: usize },
    /// The end-of-data mark was seen; `consumed` bytes (mark included) belong to this body.
    Done { consumed: usize },
}

impl DataReader {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            at_line_start: true,
            body: Vec::new(),
            limit,
            oversize: false,
        }
    }

    /// True once the body went over the limit; the rest is read and dropped so the session can go on.
    pub(crate) fn oversize(&self) -> bool {
        self.oversize
    }

    pub(crate) fn into_body(self) -> Vec<u8> {
        self.body
    }

    fn push(&mut self, bytes: &[u8]) {
        if self.oversize {
            return;
        }
        if self.body.len() + bytes.len() > self.limit {
            self.oversize = true;
            self.body = Vec::new();
            return;
        }
        self.body.extend_from_slice(bytes);
    }

    pub(crate) fn feed(&mut self, input: &[u8]) -> Feed {
        let mut pos = 0;
        while pos < input.len() {
            let rest = &input[pos..];
            match memchr_lf(rest) {
                Some(i) => {
                    let line = &rest[..=i];
                    if self.at_line_start && line == b".\r\n" {
                        return Feed::Done {
                            consumed: pos + line.len(),
                        };
                    }
                    let content = if self.at_line_start && line[0] == b'.' {
                        &line[1..]
                    } else {
                        line
                    };
                    self.push(content);
                    self.at_line_start = line.ends_with(b"\r\n");
                    pos += line.len();
                }
                None => {
                    // A partial line. A leading dot can only be judged once we know whether ".\r\n"
                    // follows, and a trailing CR may start the CRLF that ends the line: keep those
                    // bytes back until the next read.
                    if self.at_line_start && rest.len() < 3 && b".\r".starts_with(rest) {
                        return Feed::NeedMore { consumed: pos };
                    }
                    let take = rest.len() - usize::from(rest.ends_with(b"\r"));
                    if take == 0 {
                        return Feed::NeedMore { consumed: pos };
                    }
                    let chunk = &rest[..take];
                    let content = if self.at_line_start && chunk[0] == b'.' {
                        &chunk[1..]
                    } else {
                        chunk
                    };
                    self.push(content);
                    self.at_line_start = false;
                    return Feed::NeedMore {
                        consumed: pos + take,
                    };
                }
            }
        }
        Feed::NeedMore { consumed: pos }
    }
}

fn memchr_lf(bytes: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(chunks: &[&[u8]], limit: usize) -> (Option<Vec<u8>>, bool) {
        let mut reader = DataReader::new(limit);
        let mut pending: Vec<u8> = Vec::new();
        for chunk in chunks {
            pending.extend_from_slice(chunk);
            match reader.feed(&pending) {
                Feed::Done { consumed } => {
                    assert_eq!(
                        consumed,
                        pending.len(),
                        "nothing follows the mark in these tests"
                    );
                    let oversize = reader.oversize();
                    return (Some(reader.into_body()), oversize);
                }
                Feed::NeedMore { consumed } => {
                    pending.drain(..consumed);
                }
            }
        }
        (None, reader.oversize())
    }

    #[test]
    fn dot_stuffed_lines_lose_one_dot() {
        let (body, _) = read_all(&[b"a\r\n..b\r\n...\r\n.\r\n"], 1000);
        assert_eq!(body.as_deref(), Some(&b"a\r\n.b\r\n..\r\n"[..]));
    }

    #[test]
    fn end_mark_split_across_reads_is_found() {
        let (body, _) = read_all(&[b"hello\r", b"\n", b".", b"\r", b"\n"], 1000);
        assert_eq!(body.as_deref(), Some(&b"hello\r\n"[..]));
    }

    #[test]
    fn stuffed_dot_split_across_reads_is_removed() {
        let (body, _) = read_all(&[b"x\r\n", b".", b".y\r\n.\r\n"], 1000);
        assert_eq!(body.as_deref(), Some(&b"x\r\n.y\r\n"[..]));
    }

    #[test]
    fn empty_body_is_just_the_mark() {
        let (body, _) = read_all(&[b".\r\n"], 1000);
        assert_eq!(body.as_deref(), Some(&b""[..]));
    }

    #[test]
    fn bare_lf_dot_lf_does_not_end_the_body() {
        let (body, _) = read_all(&[b"a\n.\nb\r\n.\r\n"], 1000);
        assert_eq!(body.as_deref(), Some(&b"a\n.\nb\r\n"[..]));
    }

    #[test]
    fn body_over_the_limit_is_dropped_but_read_to_the_end() {
        let (body, oversize) = read_all(&[b"0123456789\r\n", b"0123456789\r\n.\r\n"], 15);
        assert!(oversize);
        assert_eq!(body.as_deref(), Some(&b""[..]));
    }

    #[test]
    fn eight_bit_bytes_pass_untouched() {
        let (body, _) = read_all(&[b"Subject: \xe9t\xe9 \xff\r\n\r\nx\r\n.\r\n"], 1000);
        assert_eq!(
            body.as_deref(),
            Some(&b"Subject: \xe9t\xe9 \xff\r\n\r\nx\r\n"[..])
        );
    }
}
