import Base from './Base';
import { isNullOrEmpty } from './util/Utils';

/**
 * Fachada del mapa: lo que ve el usuario de la API.
 */
export default class Map extends Base {
  /**
   * Crea el mapa dentro del contenedor indicado.
   * @param {Object} params Parámetros: container, center, zoom.
   */
  constructor(params = {}) {
    super();
    this.container = params.container;
    this.layers_ = [];
  }

  /**
   * Centra el mapa en unas coordenadas.
   * @param {{x: number, y: number}} center Coordenadas del nuevo centro.
   */
  setCenter(center) {
    if (isNullOrEmpty(center)) {
      throw new Error('No se ha especificado el centro');
    }
    this.getImpl().setCenter(center);
    return this;
  }

  /**
   * Fija el nivel de zoom.
   * @param {number} zoom Nivel de zoom entero.
   */
  setZoom(zoom) {
    this.getImpl().setZoom(zoom);
    return this;
  }

  /**
   * Devuelve la extensión visible actual (bounding box) como {x: {min, max}, y: {min, max}}.
   */
  getBbox() {
    return this.getImpl().getBbox();
  }

  /**
   * Añade una o varias capas al mapa.
   * @param {Array<IDEE.Layer>|IDEE.Layer} layers Capas que se añaden.
   */
  addLayers(layers) {
    const list = Array.isArray(layers) ? layers : [layers];
    list.forEach((layer) => this.layers_.push(layer));
    this.getImpl().addLayers(list);
    return this;
  }

  /**
   * Elimina capas del mapa.
   * @param {Array<IDEE.Layer>|IDEE.Layer} layers Capas que se eliminan.
   */
  removeLayers(layers) {
    const list = Array.isArray(layers) ? layers : [layers];
    this.layers_ = this.layers_.filter((l) => !list.includes(l));
    this.getImpl().removeLayers(list);
    return this;
  }
}
