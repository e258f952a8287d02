//! Engines of the tests' own: real implementations of [`RenderEngine`] that draw, die or refuse
//! the way `render`'s engines do, without a browser.

use std::io::Cursor;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use domain::Engine;
use emulate::color::DarkPass;
use jobs::RenderEngine;
use render::{RenderError, RenderRequest, Rendered};

/// What a [`TestEngine`] does with every request.
#[derive(Clone, Copy, Debug)]
pub enum Behaviour {
    /// Draws a real PNG as wide as the request asks (viewport × scale) and one pixel high, with
    /// 2×2 and 3×3 thumbnails: what was stored under which name can be told apart.
    Draw,
    /// Dies as a crashed browser does: a retryable error.
    Die,
    /// Refuses the document: an error no retry fixes.
    Refuse,
    /// Draws a blank picture of a page with visible text, each time it is asked (the renderer
    /// has drawn it once more and refused it).
    Blank,
}

pub struct TestEngine {
    behaviour: Behaviour,
    /// How long a render takes, so that a test can act while one is in flight.
    takes: Duration,
    pub renders: AtomicUsize,
    pub recolourings: AtomicUsize,
    /// The requests drawn, in order.
    pub requests: Mutex<Vec<RenderRequest>>,
}

impl TestEngine {
    pub fn new(behaviour: Behaviour) -> TestEngine {
        TestEngine::taking(behaviour, Duration::ZERO)
    }

    pub fn taking(behaviour: Behaviour, takes: Duration) -> TestEngine {
        TestEngine {
            behaviour,
            takes,
            renders: AtomicUsize::new(0),
            recolourings: AtomicUsize::new(0),
            requests: Mutex::new(Vec::new()),
        }
    }

    pub fn renders(&self) -> usize {
        self.renders.load(Ordering::SeqCst)
    }

    fn failure(&self, engine: Engine) -> Option<RenderError> {
        match self.behaviour {
            Behaviour::Draw => None,
            Behaviour::Die => Some(RenderError::EngineDied {
                engine,
                reason: "the browser process exited (signal 11)".into(),
            }),
            Behaviour::Refuse => Some(RenderError::Document(
                "the page's layout never settled".into(),
            )),
            Behaviour::Blank => Some(RenderError::BlankRender { engine }),
        }
    }
}

pub fn png(width: u32, height: u32) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    image::RgbaImage::from_pixel(width, height, image::Rgba([200, 100, 50, 255]))
        .write_to(&mut out, image::ImageFormat::Png)
        .expect("encoding a PNG in memory");
    out.into_inner()
}

#[async_trait]
impl RenderEngine for TestEngine {
    async fn render(&self, req: RenderRequest) -> Result<Rendered, RenderError> {
        self.renders.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.takes).await;
        if let Some(e) = self.failure(req.engine) {
            return Err(e);
        }
        let width = (req.viewport.width as f32 * req.scale).round() as u32;
        self.requests.lock().expect("not poisoned").push(req);
        Ok(Rendered {
            png: png(width, 1),
            width,
            height: 1,
            thumbnail: png(2, 2),
            full_thumbnail: png(3, 3),
            failed: Vec::new(),
            content_width: width,
        })
    }

    async fn recolour_dark(
        &self,
        req: &RenderRequest,
        _pass: DarkPass,
    ) -> Result<String, RenderError> {
        self.recolourings.fetch_add(1, Ordering::SeqCst);
        if let Some(e) = self.failure(Engine::Blink) {
            return Err(e);
        }
        Ok(format!("{}<!-- recoloured -->", req.html))
    }

    /// Lays nothing out: every page fits its viewport.
    async fn page_width(&self, req: &RenderRequest) -> Result<u32, RenderError> {
        if let Some(e) = self.failure(Engine::Blink) {
            return Err(e);
        }
        Ok(req.viewport.width)
    }
}
