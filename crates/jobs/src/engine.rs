//! What the render worker needs of a renderer, as a trait: the worker is tested on a real store
//! with engines that draw, fail or are missing, without starting browsers.

use async_trait::async_trait;
use domain::Engine;
use emulate::color::DarkPass;
use render::{RenderError, RenderRequest, Rendered};

/// Draws a prepared request in its engine. [`render::Renderer`] (Chromium, Firefox and WebKit
/// behind one pool) is the service's; tests bring their own.
#[async_trait]
pub trait RenderEngine: Send + Sync {
    /// The whole-document PNG and its thumbnails, or the engine's error (retryable when the
    /// engine crashed or hung: [`RenderError::is_retryable`]).
    async fn render(&self, req: RenderRequest) -> Result<Rendered, RenderError>;

    /// `req`'s HTML recoloured the way the client's dark mode does it
    /// ([`render::Renderer::recolour_dark`]).
    async fn recolour_dark(
        &self,
        req: &RenderRequest,
        pass: DarkPass,
    ) -> Result<String, RenderError>;

    /// How wide `req`'s page is once laid out at `req`'s viewport, in CSS px: its scroll width,
    /// which is wider than the viewport when something does not fit.
    async fn page_width(&self, req: &RenderRequest) -> Result<u32, RenderError>;
}

/// The page's width as the layout left it: the root's scroll width includes whatever sticks out
/// of the viewport to the right.
const PAGE_WIDTH: &str = "document.documentElement.scrollWidth";

#[async_trait]
impl RenderEngine for render::Renderer {
    async fn render(&self, req: RenderRequest) -> Result<Rendered, RenderError> {
        render::Renderer::render(self, req).await
    }

    async fn recolour_dark(
        &self,
        req: &RenderRequest,
        pass: DarkPass,
    ) -> Result<String, RenderError> {
        render::Renderer::recolour_dark(self, req, pass).await
    }

    /// Measured in Chromium, whatever `req.engine`: only Chromium evaluates a probe, so a WebKit
    /// client's page is measured as Blink lays it out.
    async fn page_width(&self, req: &RenderRequest) -> Result<u32, RenderError> {
        let probe = RenderRequest {
            engine: Engine::Blink,
            ..req.clone()
        };
        let json = self.evaluate(probe, PAGE_WIDTH).await?;
        json.trim().parse().map_err(|e| {
            RenderError::Document(format!("the page-width probe answered {json:?}: {e}"))
        })
    }
}
