"use strict";
// Swagger UI for the scheduler's API. "Try it out" works with the admin's
// session: the CSRF token from the cookie goes with every request.
(function () {
  const config = JSON.parse(document.getElementById("scheduler-swagger").textContent);
  const csrfToken = () => {
    const match = document.cookie.match(new RegExp("(?:^|; )" + config.csrfCookie + "=([^;]*)"));
    return match ? decodeURIComponent(match[1]) : null;
  };
  window.ui = SwaggerUIBundle({
    url: config.schemaUrl,
    dom_id: "#swagger-ui",
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    layout: "BaseLayout",
    deepLinking: true,
    persistAuthorization: true,
    requestInterceptor: (request) => {
      const token = csrfToken();
      if (token && request.method && request.method.toUpperCase() !== "GET") {
        request.headers[config.csrfHeader] = token;
      }
      return request;
    },
  });
})();
