//! The PNG drawing backend: plotters' `BitMapBackend` with text drawn here. plotters 0.3.7's
//! `ab_glyph` text path places each glyph at the pen position without its left side
//! bearing, so letters like "l" and "i" crowd their neighbours ("optimi zer"); this draws
//! each glyph at its outline bounds, on the baseline, with sub-pixel anti-aliasing.

use std::sync::OnceLock;

use ab_glyph::{Font, FontRef, PxScale, ScaleFont};
use plotters::backend::BitMapBackend;
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind};

use crate::style::DEJAVU_SANS;

/// The bundled font, parsed once.
pub(crate) fn font() -> Option<&'static FontRef<'static>> {
    static FONT: OnceLock<Option<FontRef<'static>>> = OnceLock::new();
    FONT.get_or_init(|| FontRef::try_from_slice(DEJAVU_SANS).ok()).as_ref()
}

/// `BitMapBackend` for everything but text.
pub(crate) struct PngBackend<'a> {
    inner: BitMapBackend<'a>,
    font: &'static FontRef<'static>,
}

impl<'a> PngBackend<'a> {
    /// Draws into `pixels` (RGB, `width × height × 3` bytes).
    pub(crate) fn new(pixels: &'a mut [u8], size: (u32, u32), font: &'static FontRef<'static>) -> Self {
        Self { inner: BitMapBackend::with_buffer(pixels, size), font }
    }
}

type Error<'a> = <BitMapBackend<'a> as DrawingBackend>::ErrorType;

impl<'a> DrawingBackend for PngBackend<'a> {
    type ErrorType = Error<'a>;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.present()
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        (iw, ih): (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.blit_bitmap(pos, (iw, ih), src)
    }

    fn draw_text<TStyle: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &TStyle,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        // The same em as the SVG backend writes into `font-size` (plotters' size ÷ 1.24);
        // ab_glyph scales by ascent − descent, not by the em.
        let em_px = style.size() / crate::style::PLOTTERS_SIZE_PER_EM;
        let units_per_em = f64::from(self.font.units_per_em().unwrap_or(2048.0));
        let px_scale = em_px * f64::from(self.font.height_unscaled()) / units_per_em;
        let font = self.font.as_scaled(PxScale::from(px_scale as f32));
        // Lay the glyphs out on a baseline at y = ascent, so the text box's top is y = 0.
        let mut glyphs = Vec::with_capacity(text.len());
        let mut caret = 0.0f32;
        let mut previous = None;
        for c in text.chars() {
            let id = font.glyph_id(c);
            if let Some(previous) = previous {
                caret += font.kern(previous, id);
            }
            glyphs.push(id.with_scale_and_position(font.scale(), ab_glyph::point(caret, font.ascent())));
            caret += font.h_advance(id);
            previous = Some(id);
        }
        let width = caret.round() as i32;
        let height = font.height().round() as i32;
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -width,
            HPos::Center => -width / 2,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -height / 2,
            VPos::Bottom => -height,
        };
        let transform = style.transform();
        let mut result = Ok(());
        for glyph in glyphs {
            let Some(outline) = self.font.outline_glyph(glyph) else { continue };
            let bounds = outline.px_bounds();
            outline.draw(|x, y, coverage| {
                if coverage <= 0.0 || result.is_err() {
                    return;
                }
                let gx = bounds.min.x as i32 + x as i32 + dx;
                let gy = bounds.min.y as i32 + y as i32 + dy;
                let (tx, ty) = transform.transform(gx, gy);
                result = self.inner.draw_pixel((pos.0 + tx, pos.1 + ty), color.mix(f64::from(coverage.min(1.0))));
            });
        }
        result
    }
}
